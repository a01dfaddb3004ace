package agent

import (
	"strings"
	"testing"
)

func TestExtractCode(t *testing.T) {
	const fa = "final_answer(x)"
	for _, tc := range []struct {
		name  string
		reply string
		want  string // "" means no code
	}{
		{"python fence", "Here:\n```python\nx = 1\nfinal_answer(x)\n```\nDone.", "x = 1\nfinal_answer(x)"},
		{"py tag", "```py\nprint(1)\n```", "print(1)"},
		{"python3 tag and CRLF", "```python3\r\nprint(1)\r\n```", "print(1)"},
		{"untagged fence", "```\nx = 2\nprint(x)\n```", "x = 2\nprint(x)"},
		{"tilde fence", "~~~python\nprint(1)\n~~~", "print(1)"},
		{"four backticks with inner fence", "````python\ns = '''\n```\n'''\nprint(s)\n````", "s = '''\n```\n'''\nprint(s)"},
		{"indented fence", "1. Run this:\n   ```python\n   x = 1\n   if x:\n       print(x)\n   ```", "x = 1\nif x:\n    print(x)"},
		{"python preferred over untagged", "```\nsome output\n```\n```python\nprint(2)\n```", "print(2)"},
		{"other languages ignored", "```bash\npip install pandas\n```\n```json\n{\"a\": 1}\n```\n```python\nimport json\n```", "import json"},
		{"only other languages", "```bash\nls -la\n```", ""},
		// Blocks in another language never run, even when their content reads as Python.
		{"text block of Python", "The program would be:\n```text\nx = 1\nprint(x)\nfinal_answer(x)\n```", ""},
		{"tilde text block of Python", "~~~text\nfinal_answer(42)\n~~~", ""},
		{"output block of Python", "```output\nprint(1)\n```", ""},
		{"console block of Python", "```console\nimport os\nos.remove('x')\n```", ""},
		{"text block beside untagged code", "```text\nfinal_answer('from text')\n```\n```\nx = 2\nprint(x)\n```", "x = 2\nprint(x)"},
		{"text block beside python", "```python\nprint(1)\n```\n```text\nprint(2)\n```", "print(1)"},
		{"untagged prose block ignored", "```\nThe answer is 42.\n```", ""},
		{"several blocks joined", "First:\n```python\nids = list_orders()\n```\nThen:\n```python\nfinal_answer(len(ids))\n```", "ids = list_orders()\n\nfinal_answer(len(ids))"},
		{"duplicate dropped", "```python\nx = 1\n```\nAgain:\n```python\nx = 1\n```", "x = 1"},
		{"nothing after final_answer", "```python\nx = 3\n" + fa + "\n```\nThe output will be:\n```python\n3\n```", "x = 3\n" + fa},
		{"unclosed fence", "Let me compute.\n```python\ntotal = 1 + 2\nfinal_answer(total)", "total = 1 + 2\nfinal_answer(total)"},
		{"empty fence", "```python\n```", ""},
		{"code tag", "Thought: sum.\n<code>\nfinal_answer(1 + 1)\n</code>", "final_answer(1 + 1)"},
		{"repl prompts", "```python\n>>> x = [1, 2]\n>>> for i in x:\n...     print(i)\n1\n2\n```", "x = [1, 2]\nfor i in x:\n    print(i)"},
		{"bare code", "import json\ndata = {'a': 1}\nprint(json.dumps(data))", "import json\ndata = {'a': 1}\nprint(json.dumps(data))"},
		{"bare code with blocks", "total = 0\nfor o in orders:\n    total += o['amount']\nfinal_answer(total)", "total = 0\nfor o in orders:\n    total += o['amount']\nfinal_answer(total)"},
		{"bare docstring", `def f():
    """Return one.

    It is one.
    """
    return 1
final_answer(f())`, "def f():\n    \"\"\"Return one.\n\n    It is one.\n    \"\"\"\n    return 1\nfinal_answer(f())"},
		{"bare annotated", "total: float = 0.0\nfinal_answer(total)", "total: float = 0.0\nfinal_answer(total)"},
		{"prose", "The total of the EU orders is 1218.5.", ""},
		{"prose with colon", "Note: this is the total.\nIt is 1218.5 (in EUR).", ""},
		{"prose starting like code", "I will call get_order for each id, then sum.", ""},
		{"single word", "Done", ""},
		{"empty", "   \n", ""},
		{"inline backticks only", "Call `final_answer(x)` when ready.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ExtractCode(tc.reply)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("ExtractCode(%q)\n got %q, %v\nwant %q", tc.reply, got, ok, tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("%q", got)
	}
	long := strings.Repeat("line of text\n", 1000)
	got := Truncate(long, 600)
	if !strings.Contains(got, "[... truncated, was 13000 chars") || len(got) > 800 {
		t.Errorf("len %d: %q", len(got), got)
	}
	if !strings.HasPrefix(got, "line of text\n") || !strings.HasSuffix(got, "line of text\n") {
		t.Errorf("head or tail lost: %q", got)
	}
	// Runes are never split.
	got = Truncate(strings.Repeat("é", 1000), 300)
	if !strings.Contains(got, "was 1000 chars") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("%q", got)
	}
}
