// libFuzzer target: each input damages the shared log index of an open store.
// Built and run by Fuzz/run.

import CLibFuzzer
import StrataTesting

#if canImport(Glibc)
    import Glibc
#endif

/// One input, run through `FuzzHarness.sharedIndex`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzHarness.sharedIndex(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
