// libFuzzer target: each input is a selector byte and the bytes of one of
// the decoders that read through the bounded reader (a reader program,
// a key tuple, a sync payload, a Codable value). Built and run by Fuzz/run.

import CLibFuzzer
import StrataObjectTesting

#if canImport(Glibc)
    import Glibc
#endif

/// One input, run through `DecoderFuzzHarness.decoders`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    DecoderFuzzHarness.decoders(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
