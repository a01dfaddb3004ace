# expect: contained
import os
leaked = [k for k in os.environ if "SECRET" in k or k in ("PATH", "HOME_HOST", "USER")]
print("ESCAPED %r" % leaked if leaked else "CONTAINED")
