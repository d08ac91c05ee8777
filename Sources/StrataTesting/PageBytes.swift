import StrataEngine

/// Helpers for tests that damage store files on purpose.
public enum PageBytes {
    /// Recomputes the checksum of page `page` inside a file image, as the
    /// engine computes it (CRC-32C of the big-endian page number followed by
    /// bytes 4..<pageSize), so that a test can forge a page that passes its
    /// checksum but is structurally broken.
    public static func resealChecksum(_ file: inout [UInt8], page: Int, pageSize: Int) {
        let base = page * pageSize
        let number: [UInt8] = [UInt8(page >> 24 & 0xff), UInt8(page >> 16 & 0xff), UInt8(page >> 8 & 0xff), UInt8(page & 0xff)]
        var value = number.withUnsafeBytes { crc32c(0, $0.baseAddress!, 4) }
        file.withUnsafeBytes { raw in value = crc32c(value, raw.baseAddress! + base + 4, pageSize - 4) }
        file[base] = UInt8(value >> 24)
        file[base + 1] = UInt8(value >> 16 & 0xff)
        file[base + 2] = UInt8(value >> 8 & 0xff)
        file[base + 3] = UInt8(value & 0xff)
    }
}
