"""What every floor shares and nothing of the project's own: the lowest floor, importing no
other module of gnau_service.

- :mod:`~gnau_service.common.quoting`: a bad value quoted, cut short, in any message.
"""
