"""The commands over the client library and the dev tools: each module is one ``voicectl``
subcommand (``register(subparsers)``, its options and help, and ``run(args)``, which prints and
returns the exit code), the code it runs being below it.

- :mod:`~voicectl.commands.transcribe`, :mod:`~voicectl.commands.speak`,
  :mod:`~voicectl.commands.mic` and :mod:`~voicectl.commands.talk`: over the client library
  (:mod:`voice_client`); ``transcribe``'s target options serve ``mic`` and ``connect-replay`` too.
- :mod:`~voicectl.commands.local_runtime` and :mod:`~voicectl.commands.connect_replay`: over the
  dev tools (:mod:`voice_devtools`, installed in a clone only), imported inside the command
  (:mod:`~voicectl.commands.dev_tools`).
"""
