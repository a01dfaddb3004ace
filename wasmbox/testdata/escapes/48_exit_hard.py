# expect: exit
import os
os._exit(7)
