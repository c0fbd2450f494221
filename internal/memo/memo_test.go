package memo

import (
	"sync"
	"testing"
)

func TestMap(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		puts    []int
		present []int
		absent  []int
	}{
		{name: "kept", max: 3, puts: []int{1, 2, 3}, present: []int{1, 2, 3}},
		{name: "full starts over", max: 3, puts: []int{1, 2, 3, 4}, present: []int{4}, absent: []int{1, 2, 3}},
		{name: "a key again does not fill it", max: 2, puts: []int{1, 2, 2, 1}, present: []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New[int, string](tt.max)
			for _, k := range tt.puts {
				m.Put(k, string(rune('a'+k)))
			}
			for _, k := range tt.present {
				if v, ok := m.Get(k); !ok || v != string(rune('a'+k)) {
					t.Errorf("Get(%d) = %q, %v; want %q", k, v, ok, string(rune('a'+k)))
				}
			}
			for _, k := range tt.absent {
				if v, ok := m.Get(k); ok {
					t.Errorf("Get(%d) = %q; want nothing", k, v)
				}
			}
		})
	}
}

func TestMapConcurrent(t *testing.T) {
	m := New[int, int](16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := (g*1000 + i) % 40
				if v, ok := m.Get(k); ok && v != k*k {
					t.Errorf("Get(%d) = %d", k, v)
				}
				m.Put(k, k*k)
			}
		})
	}
	wg.Wait()
	if len(m.m) > 16 {
		t.Fatalf("%d values kept; bound 16", len(m.m))
	}
}
