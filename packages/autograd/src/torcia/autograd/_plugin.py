"""torcia-autograd's built-in plugin: hands core the mode that records operations."""

from torcia.plugins import hookimpl


@hookimpl
def torcia_autograd_engine():
    from torcia.autograd import engine

    return engine.ENGINE
