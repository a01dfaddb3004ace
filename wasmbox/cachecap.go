package wasmbox

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultCacheMaxBytes caps the on-disk cache when Config.CacheMaxBytes is zero.
const DefaultCacheMaxBytes = 1 << 30

// cacheMinAge protects entries used this recently from eviction: another process may be between writing an entry
// and reading it (compiling takes seconds to minutes).
const cacheMinAge = 10 * time.Minute

// staleTempAge is when a leftover temporary file (a writer that crashed) is removed.
const staleTempAge = time.Hour

// cacheEntry is one evictable unit: files of one cache directory that share a name up to the first dot (a saved
// snapshot's .img and .sp, an artifact's .wasm and .json, one file of compiled code).
type cacheEntry struct {
	files   []string
	size    int64
	lastUse time.Time
}

// enforceCacheCap removes whole entries, least recently used first, until the cache holds at most max bytes
// (max < 0: no cap; 0: DefaultCacheMaxBytes). Entries used within minAge are kept even past the cap. Removal is
// unlinking: a process that has an entry open or mapped keeps reading it, and one that looks it up afterwards
// misses and rebuilds it; files appear only by rename, so nobody reads a part.
func enforceCacheCap(root string, max int64, minAge time.Duration) {
	if root == "" || max < 0 {
		return
	}
	if max == 0 {
		max = DefaultCacheMaxBytes
	}
	entries, total := scanCache(root)
	if total <= max {
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].lastUse.Before(entries[j].lastUse) })
	now := time.Now()
	for _, e := range entries {
		if total <= max || now.Sub(e.lastUse) < minAge {
			break
		}
		for _, f := range e.files {
			os.Remove(f)
		}
		total -= e.size
	}
}

// cacheDirs are the directories of the cache that hold entries: the artifacts, the saved snapshots, and the
// compiled code of every wazero version that ever used the cache.
func cacheDirs(root string) []string {
	dirs := []string{filepath.Join(root, "artifacts"), filepath.Join(root, "snapshots")}
	if m, _ := filepath.Glob(filepath.Join(root, "wazero-*")); len(m) > 0 {
		dirs = append(dirs, m...)
	}
	return dirs
}

// scanCache lists the cache's entries and their total size, removing temporary files left by crashed writers.
func scanCache(root string) ([]*cacheEntry, int64) {
	var total int64
	var out []*cacheEntry
	now := time.Now()
	for _, dir := range cacheDirs(root) {
		des, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		byName := map[string]*cacheEntry{}
		for _, de := range des {
			if !de.Type().IsRegular() {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue
			}
			p := filepath.Join(dir, de.Name())
			if strings.HasPrefix(de.Name(), ".tmp-") || strings.HasSuffix(de.Name(), ".tmp") {
				if now.Sub(fi.ModTime()) > staleTempAge {
					os.Remove(p)
					continue
				}
			}
			stem, _, _ := strings.Cut(de.Name(), ".")
			if stem == "" {
				stem = de.Name()
			}
			e := byName[stem]
			if e == nil {
				e = &cacheEntry{}
				byName[stem] = e
				out = append(out, e)
			}
			e.files = append(e.files, p)
			e.size += fi.Size()
			total += fi.Size()
			if fi.ModTime().After(e.lastUse) {
				e.lastUse = fi.ModTime()
			}
		}
	}
	return out, total
}

// touch records a use of a cache file for the size cap (its modification time).
func touch(path string) {
	if path != "" {
		now := time.Now()
		_ = os.Chtimes(path, now, now)
	}
}
