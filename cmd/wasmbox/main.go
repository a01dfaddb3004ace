// Command wasmbox runs Python programs in the wasmbox sandbox.
//
//	wasmbox run [--timeout D] [--memory SIZE] [--output-limit SIZE] [--env KEY=VALUE]... [--stdin]
//	            [--workspace DIR] [--writeback] [--audit LOG] [--json] (FILE | -c CODE | -)
//	            [--mcp 'CMD ARGS' | --mcp URL]... [--approve allow|deny|ask] [--policy FILE] [--runtime NAME]
//	wasmbox mcp [--http ADDR] [--timeout D] [--memory SIZE] [--max-sessions N] [--idle-timeout D] ...
//	wasmbox version [--json]
//	wasmbox precompile [--preload MODULE]... [--snapshot-only] [--runtime NAME] DIR
//	wasmbox audit verify [--key-file F | --key-env VAR] [--head HASH] [--count N] FILE
//
// Exit codes: 124 on timeout; 2 on usage errors; 125 when wasmbox fails; otherwise the program's own, except that
// a program exiting with 2, 124, 125 or a code outside 0..255 makes the CLI exit with 1 (the program's own code is
// in the JSON's program_exit_code and named on stderr), so the CLI's codes always mean what they say.
//
// The program's standard input is empty unless --stdin passes this process's; it is read within the run's
// deadline. --writeback copies the workspace back only after a program that ran to its end.
//
// --mcp gives the program the tools of MCP servers, each call through the governance gate: --policy FILE decides
// (default: read-only and mutating tools run, the rest need approval), --approve answers what needs approval
// (deny by default; ask reads the answer from the terminal), --audit LOG records every call. `wasmbox mcp`
// serves the sandbox to MCP clients over stdio, or streamable HTTP on loopback with --http.
// The environment names the cache and a precompiled directory: WASMBOX_CACHE_DIR (default: the user's cache
// directory + wasmbox/compile), WASMBOX_CACHE_MAX (its cap, default 1GiB, "off" for none) and WASMBOX_PRECOMPILED
// (a directory made by `wasmbox precompile DIR` at build time, used read-only).
//
// WASMBOX_STARTTRACE (set, or the Unix nanoseconds at which a parent started this process) prints on stderr, at
// exit, one line "wasmbox starttrace: " followed by a JSON list of the phases of the start (wall and CPU time),
// for bench/compare's cold-start figures.
//
// --runtime picks the interpreter among those this build links in (`wasmbox version` lists them): this command
// has "base" only; github.com/wasmbox/wasmbox/sci/cmd/wasmbox-sci is the same command with "sci" (numpy and
// pandas) as well. A runtime that is not linked in is a usage error that says where it is.
package main

import (
	"os"

	"github.com/wasmbox/wasmbox/internal/cli"
)

func main() { os.Exit(cli.Exec()) }
