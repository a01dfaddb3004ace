import tools
try:
    r = tools.issue_refund("A-1002", 50.0)
    print("refunded", r["amount"])
except tools.ToolDenied as e:
    print("not refunded:", type(e).__name__)
