# expect: contained
import subprocess
try:
    subprocess.run(["/bin/sh", "-c", "id"])
    print("ESCAPED")
except (OSError, RuntimeError):
    print("CONTAINED")
