"""The embedded emulation: the real handlers and the compiled ASL on moto, in one process."""
