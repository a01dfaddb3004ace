// Package wheeltest builds small wheels for tests (the machine that runs them has no package index).
package wheeltest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Wheel describes one wheel to build.
type Wheel struct {
	Name, Version string
	// Tag is the wheel's python-abi-platform tag; empty means "py3-none-any".
	Tag string
	// Requires are Requires-Dist lines.
	Requires []string
	// Files are the wheel's files by path (modules, packages), besides its .dist-info.
	Files map[string]string
}

// FileName is the wheel's file name (PEP 427).
func (w Wheel) FileName() string { return fmt.Sprintf("%s-%s-%s.whl", w.Name, w.Version, w.tag()) }

func (w Wheel) tag() string {
	if w.Tag == "" {
		return "py3-none-any"
	}
	return w.Tag
}

// Bytes builds the wheel: the files, METADATA, WHEEL and a RECORD with the right hashes.
func (w Wheel) Bytes() ([]byte, error) {
	info := w.Name + "-" + w.Version + ".dist-info"
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	purelib := strings.HasSuffix(w.tag(), "-none-any")
	files := map[string]string{
		info + "/METADATA": meta,
		info + "/WHEEL":    fmt.Sprintf("Wheel-Version: 1.0\nGenerator: wheeltest\nRoot-Is-Purelib: %v\nTag: %s\n", purelib, w.tag()),
	}
	for p, b := range w.Files {
		files[p] = b
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, p := range paths {
		f, err := zw.Create(p)
		if err != nil {
			return nil, err
		}
		f.Write([]byte(files[p]))
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	record.WriteString(info + "/RECORD,,\n")
	f, err := zw.Create(info + "/RECORD")
	if err != nil {
		return nil, err
	}
	f.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write builds w into dir and returns its file name.
func (w Wheel) Write(dir string) (string, error) {
	b, err := w.Bytes()
	if err != nil {
		return "", err
	}
	return w.FileName(), os.WriteFile(filepath.Join(dir, w.FileName()), b, 0o644)
}
