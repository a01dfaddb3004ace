package governance

import "testing"

// mapStore is a Store whose value cannot be compared with ==.
type mapStore struct {
	*MemoryStore
	m map[string]int
}

// wrappedStore is comparable as a type, but not when its field holds a mapStore.
type wrappedStore struct{ Store }

func TestSameStoreNeverPanics(t *testing.T) {
	a, b := new(MemoryStore), new(MemoryStore)
	cases := []struct {
		name string
		x, y Store
		want bool
	}{
		{"one store", a, a, true},
		{"two stores", a, b, false},
		{"nil stores", nil, nil, false},
		{"a value that cannot be compared", mapStore{a, nil}, mapStore{a, nil}, false},
		{"a comparable type holding one that is not", wrappedStore{mapStore{a, nil}}, wrappedStore{mapStore{a, nil}}, false},
		{"a wrapper of the store", wrappedStore{a}, a, false},
	}
	for _, c := range cases {
		if got := sameStore(c.x, c.y); got != c.want {
			t.Errorf("%s: sameStore = %v; want %v", c.name, got, c.want)
		}
	}
	if j := newJointStore(&StoreBudget{}, &StoreAuditor{}); j != nil {
		t.Errorf("a StoreBudget and a StoreAuditor without stores make a joint store")
	}
}
