"""config/models.py: the facts of what the app deploys (Voxtral behind the bridge, the Sonic model
package) and the streams that fit a GPU's KV cache."""

from __future__ import annotations

from config.models import max_num_seqs_that_fit
from constructs_lib.facts import instance_types


def test_gpu_memory_estimate_values():
    l4 = instance_types.lookup("ml.g6.4xlarge")
    t4 = instance_types.lookup("ml.g4dn.xlarge")
    l40s = instance_types.lookup("ml.g6e.xlarge")
    assert max_num_seqs_that_fit(l4, 45000, 0.9) == 8
    assert max_num_seqs_that_fit(t4, 45000, 0.9) == 3  # the catalogue's 16 GiB: no pinned facts for the T4
    assert max_num_seqs_that_fit(t4, 45000, 0.6) == 0  # 9.6 GiB: the weights and overhead leave no room
    assert max_num_seqs_that_fit(l40s, 45000, 0.9) == 23
