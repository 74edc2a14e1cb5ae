"""What crosses a process boundary, defined once: the bridge container's environment
(:mod:`.bridge_env`), the realtime stream's vocabulary and limits (:mod:`.realtime`), the staged
weights' manifest (:mod:`.weights`) and the model's identity and S3 prefix (:mod:`.model`).

The bottom layer of the project: standard library only, and nothing of the project outside this
package, so that everything else imports it, the bridge's image and the model staging build included
(both ship it).
"""
