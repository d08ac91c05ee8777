import CZlib
import Foundation
import StrataEngine

/// How `.externalStorage` data is stored in its tree (`x.<Entity>.<name>`,
/// keyed by row id): a format byte, the data's length as a varint, then
/// the bytes — zlib-compressed (format 1) when that makes them smaller by
/// at least an eighth, as they are (format 0) otherwise. Data under 64
/// bytes is not worth a compression attempt, nor data whose first 8 KiB
/// do not shrink by an eighth at zlib's fastest level (photos, video and
/// archives, compressed already: the attempt cost more than the write).
package enum ExternalBlob {
    static func encode(_ data: Data) -> [UInt8] {
        let raw = [UInt8](data)
        var out: [UInt8] = []
        if raw.count >= 64, mayShrink(raw), let packed = compress(raw), packed.count < raw.count - raw.count / 8 {
            out.append(1)
            Varint.append(UInt64(raw.count), to: &out)
            out.append(contentsOf: packed)
        } else {
            out.append(0)
            Varint.append(UInt64(raw.count), to: &out)
            out.append(contentsOf: raw)
        }
        return out
    }

    /// The data, or nil when the bytes are damaged (wrong format, length or
    /// compressed stream). The length is checked before anything is
    /// allocated, against a 1 GiB ceiling.
    package static func decode(_ bytes: [UInt8]) -> Data? {
        let header: (format: UInt8, length: UInt64, end: Int)? = bytes.withUnsafeBytes { raw in
            var input = ByteReader(raw)
            do {
                return (try input.byte(), try input.varint(), input.index)
            } catch {
                return nil
            }
        }
        guard let (format, length, end) = header, length <= 1 << 30 else { return nil }
        let payload = bytes[end...]
        switch format {
        case 0:
            return payload.count == Int(length) ? Data(payload) : nil
        case 1:
            return uncompress(Array(payload), length: Int(length)).map { Data($0) }
        default:
            return nil
        }
    }

    /// Whether the first 8 KiB of `raw` (all of it, when shorter) shrink
    /// by an eighth at zlib's fastest level.
    private static func mayShrink(_ raw: [UInt8]) -> Bool {
        let probe = raw.count <= 8192 ? raw : Array(raw[..<8192])
        guard let packed = compress(probe, level: 1) else { return false }
        return packed.count < probe.count - probe.count / 8
    }

    private static func compress(_ raw: [UInt8], level: Int32 = 6) -> [UInt8]? {
        var size = compressBound(uLong(raw.count))
        var out = [UInt8](repeating: 0, count: Int(size))
        let status = out.withUnsafeMutableBufferPointer { target in
            raw.withUnsafeBufferPointer { source in
                compress2(target.baseAddress, &size, source.baseAddress, uLong(raw.count), level)
            }
        }
        guard status == Z_OK else { return nil }
        return Array(out.prefix(Int(size)))
    }

    private static func uncompress(_ packed: [UInt8], length: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: length)
        var size = uLong(length)
        let status = out.withUnsafeMutableBufferPointer { target in
            packed.withUnsafeBufferPointer { source in
                CZlib.uncompress(target.baseAddress, &size, source.baseAddress, uLong(packed.count))
            }
        }
        guard status == Z_OK, Int(size) == length else { return nil }
        return out
    }
}
