# expect: contained
import urllib.request
try:
    urllib.request.urlopen("http://169.254.169.254/latest/meta-data/", timeout=1).read()
    print("ESCAPED")
except Exception:
    print("CONTAINED")
