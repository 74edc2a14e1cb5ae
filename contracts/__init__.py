"""What crosses a process boundary, defined once: the bridge container's environment
(:mod:`.bridge_env`), the realtime stream's vocabulary and limits (:mod:`.realtime`), the staged
weights' manifest (:mod:`.weights`), the model's identity and S3 prefix (:mod:`.model`), and the
voice agent's environment and metrics (:mod:`.agent_env`, :mod:`.agent_metrics`).

The bottom layer of the project: plain standard-library values, and nothing of the project outside
this package, so that everything else imports it, the images and the model staging build included
(they ship it).
"""
