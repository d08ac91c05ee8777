// libFuzzer target: each input is a list of edits to a valid store of the
// object layer, which is then opened, queried, checked and saved to.
// Built and run by Fuzz/run.

import CLibFuzzer
import StrataObjectTesting

#if canImport(Glibc)
    import Glibc
#endif

/// One input, run through `ObjectFuzzHarness.objectStore`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    ObjectFuzzHarness.objectStore(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
