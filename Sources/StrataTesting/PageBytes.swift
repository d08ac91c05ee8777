import CZlib

/// Helpers for tests that damage store files on purpose.
public enum PageBytes {
    /// Recomputes the checksum of page `page` inside a file image, as the
    /// engine computes it (CRC-32 of the big-endian page number followed by
    /// bytes 4..<pageSize), so that a test can forge a page that passes its
    /// checksum but is structurally broken.
    public static func resealChecksum(_ file: inout [UInt8], page: Int, pageSize: Int) {
        let base = page * pageSize
        let number: [UInt8] = [UInt8(page >> 24 & 0xff), UInt8(page >> 16 & 0xff), UInt8(page >> 8 & 0xff), UInt8(page & 0xff)]
        var crc = number.withUnsafeBytes { crc32(0, $0.baseAddress!.assumingMemoryBound(to: Bytef.self), 4) }
        file.withUnsafeBytes { raw in
            crc = crc32(crc, (raw.baseAddress! + base + 4).assumingMemoryBound(to: Bytef.self), UInt32(pageSize - 4))
        }
        let value = UInt32(truncatingIfNeeded: crc)
        file[base] = UInt8(value >> 24)
        file[base + 1] = UInt8(value >> 16 & 0xff)
        file[base + 2] = UInt8(value >> 8 & 0xff)
        file[base + 3] = UInt8(value & 0xff)
    }
}
