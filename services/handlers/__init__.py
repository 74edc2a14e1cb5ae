"""The Lambda handlers the constructs deploy, one folder of code per function: ``cleanup/`` (the
custom resources that let ``cdk destroy`` finish, ``constructs_lib/cleanup.py``),
``model_staging_waiter/`` (starts the staging build and waits for it,
``constructs_lib/artifacts/model_staging.py``) and ``connect_start/`` (Amazon Connect's start
function and the example flow, ``constructs_lib/connect/transcription.py``).

The folders are package data, not packages: each is a Lambda asset as it is, and Lambda loads its
modules from the folder's root (``index.on_event``). The constructs find this package with
:func:`constructs_lib.service_code.handler_dir`; nothing imports it.
"""
