"""What the people who deploy and run the stacks use: check an account before a deploy and a
deployment after it, stage the model weights, and size and price a deployment.

Subcommands: :mod:`~voicectl.operations.preflight`, :mod:`~voicectl.operations.stage_model`,
:mod:`~voicectl.operations.verify`, :mod:`~voicectl.operations.cost` and
:mod:`~voicectl.operations.capacity`. Behind the last two: :mod:`~voicectl.operations.pricing`
(on-demand prices from the Price List API, a reusable lookup) and
:mod:`~voicectl.operations.price_table` (the dated table used without ``--prices``).
"""
