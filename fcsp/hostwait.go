package fcsp

import "time"

// SpinInDriver, given to WithHostWait, leaves Synchronize's wait to
// cuStreamSynchronize, which spins the calling OS thread in the driver.
const SpinInDriver time.Duration = -1
