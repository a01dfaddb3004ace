package agent

import (
	"regexp"
	"strings"
)

// ExtractCode finds the Python program in a model's reply. It reports false when the reply holds no code (prose
// only), which the agent answers with a nudge rather than running anything.
//
// The rules, in order:
//
//  1. Fenced blocks (``` or ~~~, three or more). Blocks tagged python, py, python3, py3 or ipython are the
//     candidates; if there are none, untagged blocks that look like Python are. Blocks tagged with another
//     language (json, bash, text, output, ...) never run. A fence left open at the end of the reply (the model
//     was cut off) runs to the end.
//  2. <code>...</code> or <python>...</python> tags, with the same preference.
//  3. Otherwise the whole reply, if it reads as Python: its first line and at least 80% of its other lines look
//     like Python statements, comments or indented continuations.
//
// When there are several candidate blocks, they are joined in order (models often split one program over
// several blocks), except that repeated blocks are dropped and blocks after the first one that calls
// final_answer are dropped (they could never run). Interactive-session blocks (">>> " prompts) keep only
// their input lines.
func ExtractCode(reply string) (string, bool) {
	reply = strings.ReplaceAll(reply, "\r\n", "\n")
	blocks := fencedBlocks(reply)
	if len(blocks) == 0 {
		blocks = taggedBlocks(reply)
	}
	if len(blocks) > 0 {
		var py, bare []string
		for _, b := range blocks {
			switch {
			case isPythonTag(b.lang):
				py = append(py, b.body)
			case b.lang == "" && looksLikePython(b.body):
				bare = append(bare, b.body)
			}
		}
		if len(py) == 0 {
			py = bare
		}
		if code := joinBlocks(py); code != "" {
			return code, true
		}
		return "", false
	}
	if looksLikePython(reply) {
		return normalise(reply), true
	}
	return "", false
}

type block struct {
	lang string
	body string
}

var fenceOpen = regexp.MustCompile("^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^`\\s]*)[^\n`]*$")

// fencedBlocks returns the fenced blocks of s in order, each with its lower-cased info string (first word).
func fencedBlocks(s string) []block {
	lines := strings.Split(s, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		fence := m[1]
		lang := strings.ToLower(strings.TrimPrefix(m[2], "{"))
		lang = strings.TrimSuffix(lang, "}")
		lang = strings.TrimPrefix(lang, ".")
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			t := strings.TrimSpace(lines[j])
			if strings.HasPrefix(t, fence[:1]) && strings.Trim(t, fence[:1]) == "" && len(t) >= len(fence) {
				break
			}
			body = append(body, lines[j])
		}
		out = append(out, block{lang: lang, body: strings.Join(body, "\n")})
		i = j
	}
	return out
}

var tagRE = regexp.MustCompile(`(?s)<(code|python)(?:\s[^>]*)?>(.*?)(?:</(?:code|python)>|$)`)

func taggedBlocks(s string) []block {
	var out []block
	for _, m := range tagRE.FindAllStringSubmatch(s, -1) {
		lang := ""
		if m[1] == "python" {
			lang = "python"
		}
		out = append(out, block{lang: lang, body: m[2]})
	}
	return out
}

func isPythonTag(lang string) bool {
	switch lang {
	case "python", "py", "python3", "py3", "ipython", "pycon", "python-repl":
		return true
	}
	return false
}

// joinBlocks joins candidate blocks: duplicates dropped, nothing after the first final_answer call.
func joinBlocks(bodies []string) string {
	seen := map[string]bool{}
	var parts []string
	for _, b := range bodies {
		b = normalise(b)
		if strings.TrimSpace(b) == "" || seen[b] {
			continue
		}
		seen[b] = true
		parts = append(parts, b)
		if callsFinalAnswer(b) {
			break
		}
	}
	return strings.Join(parts, "\n\n")
}

var finalAnswerCall = regexp.MustCompile(`(?m)^\s*(?:[^#\n]*[^\w.#])?final_answer\s*\(`)

func callsFinalAnswer(code string) bool { return finalAnswerCall.MatchString(code) }

// normalise strips REPL prompts, common indentation and surrounding blank lines.
func normalise(code string) string {
	lines := strings.Split(code, "\n")
	if first := firstNonBlank(lines); first >= 0 && strings.HasPrefix(strings.TrimLeft(lines[first], " \t"), ">>>") {
		var kept []string
		for _, l := range lines {
			t := strings.TrimLeft(l, " \t")
			switch {
			case t == ">>>" || t == "...":
				kept = append(kept, "")
			case strings.HasPrefix(t, ">>> "), strings.HasPrefix(t, "... "):
				kept = append(kept, t[4:])
			}
		}
		lines = kept
	}
	lines = dedent(lines)
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

func firstNonBlank(lines []string) int {
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			return i
		}
	}
	return -1
}

func dedent(lines []string) []string {
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = ind, false
			continue
		}
		for !strings.HasPrefix(ind, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	if prefix == "" {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimPrefix(l, prefix)
	}
	return out
}

// pyLine matches a line that starts like a Python statement.
var pyLine = regexp.MustCompile(`^(?:#|@\w|>>> |(?:import|from|def|class|if|elif|while|for|with|try|except|finally|return|raise|assert|del|global|nonlocal|async|await|yield|lambda)\b|(?:else|try|finally)\s*:|(?:pass|break|continue)\s*(?:#.*)?$|print\(|final_answer\(|[\])}]|"""|'''|[A-Za-z_][\w.]*(?:\[[^\]]*\])*\s*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=[^=]|[A-Za-z_][\w.]*\(|[A-Za-z_]\w*\s*,\s*[A-Za-z_]\w*\s*=[^=]|[A-Za-z_]\w*\s*:\s*[A-Za-z_][\w\[\], .|]*=[^=])`)

// looksLikePython reports whether text reads as a Python program rather than prose.
func looksLikePython(text string) bool {
	lines := strings.Split(normalise(text), "\n")
	total, good := 0, 0
	inString := ""
	first := firstNonBlank(lines)
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		total++
		indented := l != strings.TrimLeft(l, " \t")
		ok := inString != "" || indented || pyLine.MatchString(t)
		if i == first && !pyLine.MatchString(t) {
			return false
		}
		if ok {
			good++
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(t, q)%2 == 1 {
				if inString == q {
					inString = ""
				} else if inString == "" {
					inString = q
				}
			}
		}
	}
	return total > 0 && good*5 >= total*4
}
