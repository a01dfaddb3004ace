# expect: contained
import os
bad = [n for n in ("fork", "forkpty", "execv", "execve", "spawnv", "posix_spawn", "popen", "kill") if hasattr(os, n)]
if bad:
    try:
        os.fork()
        print("ESCAPED")
    except Exception:
        print("CONTAINED")
else:
    print("CONTAINED")
