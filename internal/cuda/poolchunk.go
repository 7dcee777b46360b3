package cuda

// PoolChunk is the unit in which the driver's stream-ordered pools map
// device memory and to which a pool's maximum size is rounded up: 32 MiB on
// the H200 (fcsp.TestGPUPoolProbe, testdata/h200-pool-probe.tsv). Defined
// once: the SDK uses it to tell a pool's own limit from a full device, and
// the fake driver maps its pools in it.
const PoolChunk = 32 << 20
