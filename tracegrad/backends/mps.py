"""``tracegrad.backends.mps``: Apple's Metal backend, which tracegrad does not have."""


def is_available():
    return False


def is_built():
    return False


def is_macos13_or_newer(minor=0):
    return False


def is_macos_or_newer(major, minor):
    return False
