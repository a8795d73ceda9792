"""The call boundary: every call of a kernel guarded (input sacred, output fresh, a hang stopped), a kernel named
by its path run in a process of its own, what crosses between the two processes, and the command that replays a
case."""
