# expect: timeout
import re
re.match(r"(a+)+$", "a" * 64 + "!")
