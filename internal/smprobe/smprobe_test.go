package smprobe

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSMsAndOverlap(t *testing.T) {
	out := make([]byte, 4*6)
	for i, v := range []uint32{7, 3, Unwritten, 3, 0, 7} {
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
	require.Equal(t, []int{0, 3, 7}, SMs(out), "ascending, once each, unwritten blocks left out")
	require.Equal(t, []int{3, 7}, Overlap([]int{0, 3, 7}, []int{3, 5, 7, 9}))
	require.Empty(t, Overlap([]int{0, 1}, []int{2, 3}))
	require.Equal(t, 4*132, Blocks(132))
}
