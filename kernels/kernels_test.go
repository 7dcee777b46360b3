package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestChainValueWithinClosedForm(t *testing.T) {
	for _, steps := range []int{0, 1, 1024, 8192} {
		out := make([]byte, 4*2048)
		for i := 0; i < 2048; i++ {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(ChainValue(i, steps)))
		}
		if err := CheckChain(out, steps); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckChainCatchesWrongValues(t *testing.T) {
	out := make([]byte, 4*16)
	for i := 0; i < 16; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(ChainValue(i, 100)))
	}
	binary.LittleEndian.PutUint32(out[4*7:], math.Float32bits(0.5))
	if err := CheckChain(out, 100); err == nil {
		t.Fatal("a wrong element passed the check")
	}
}
