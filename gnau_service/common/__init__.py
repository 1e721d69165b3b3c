"""What every floor shares and nothing of the project's own: the lowest floor, importing no
other module of gnau_service.

- :mod:`~gnau_service.common.quoting`: a bad value quoted, cut short, in any message.
- :mod:`~gnau_service.common.private_files`: secret files read only if private, written whole at
  0600, under a lock.
- :mod:`~gnau_service.common.secret_files`: whether the service takes a secret file, and what to
  tell the operator.
- :mod:`~gnau_service.common.strict_json`: JSON text from outside, and the objects a format
  names the members of, read strictly.
"""
