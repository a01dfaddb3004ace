import tools
total = sum(o["amount"] for o in map(tools.get_order, tools.list_orders()) if o["region"] == "EU")
print(total)
