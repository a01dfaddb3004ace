# expect: contained
import posix
print("ESCAPED" if any(b"SECRET" in k for k in posix.environ) else "CONTAINED")
