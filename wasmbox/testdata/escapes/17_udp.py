# expect: contained
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("8.8.8.8", 53))
    print("ESCAPED")
except OSError:
    print("CONTAINED")
