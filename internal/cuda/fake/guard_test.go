package fake_test

import (
	"reflect"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

type seen struct{ refused, saw map[string]bool }

func (s *seen) Refuse(op string) error { s.refused[op] = true; return nil }
func (s *seen) See(op string, _ cuda.Context, _ cuda.Stream, err error) error {
	s.saw[op] = true
	return err
}

// Every method of cuda.Driver that returns an error hands it to the
// watcher, and asks Refuse first unless it is a release call: called with
// zero arguments on the fake, each must reach See under some op.
func TestGuardSeesEveryMethod(t *testing.T) {
	it := reflect.TypeOf((*cuda.Driver)(nil)).Elem()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	for i := 0; i < it.NumMethod(); i++ {
		m := it.Method(i)
		ft := m.Type
		if ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != errType {
			continue // Name: no error to see
		}
		t.Run(m.Name, func(t *testing.T) {
			w := &seen{refused: map[string]bool{}, saw: map[string]bool{}}
			g := cuda.NewGuard(fake.New(fake.H200()), w)
			args := make([]reflect.Value, ft.NumIn())
			for j := range args {
				args[j] = reflect.Zero(ft.In(j))
			}
			func() {
				defer func() { _ = recover() }() // a zero argument the fake cannot take
				reflect.ValueOf(g).MethodByName(m.Name).Call(args)
			}()
			if len(w.saw) != 1 {
				t.Fatalf("%s: the watcher saw %v, want exactly one op", m.Name, w.saw)
			}
			if cuda.IsRelease(m.Name) == (len(w.refused) == 1) {
				t.Fatalf("%s: release %v, but Refuse asked: %v", m.Name, cuda.IsRelease(m.Name), w.refused)
			}
		})
	}
}
