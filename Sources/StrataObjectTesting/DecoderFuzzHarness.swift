import Foundation
import Strata
import StrataEngine
import StrataSync

/// The fuzz harness of the byte decoders that read untrusted input through
/// the one bounded reader (`ByteReader`) and varint codec (`Varint`): the
/// first input byte picks a decoder, the rest are its bytes. Each decoder
/// must fail with its typed error or decode a value that encodes and
/// decodes back to itself; the reader itself runs a program of reads and
/// is held to a plain reference. Any other outcome traps, which libFuzzer
/// reports. (Records, history and external data are fuzzed inside a
/// store by ``ObjectFuzzHarness/objectStore(_:)``.)
public enum DecoderFuzzHarness {
    /// Runs one input; true when its bytes decoded (a reader program
    /// always counts as decoded).
    @discardableResult
    public static func decoders(_ input: [UInt8]) -> Bool {
        guard let selector = input.first else { return false }
        let bytes = Array(input.dropFirst())
        switch selector % 4 {
        case 0:
            readerProgram(bytes)
            return true
        case 1: return keys(bytes)
        case 2: return syncPayload(bytes)
        default: return codable(bytes)
        }
    }

    /// Seeds: one valid input per decoder.
    public static func seeds() -> [(name: String, bytes: [UInt8])] {
        var reader: [UInt8] = [0, 0x23]
        Varint.append(300, to: &reader)
        Varint.append(UInt64.max, to: &reader)
        reader += [3, 0x61, 0x62, 0x63, 0xFF, 0xFF]
        let key = [1] + KeyEncoding.encode([.int(-5), .string("héllo\u{0}"), .bytes([0, 0xFF]), .double(2.5), .null])
        let change = SyncChangeSet(changes: [
            .init(
                kind: .insert, entity: "Task", id: SyncID(bytes: Array(0..<16)),
                fields: [.init(name: "title", wire: 2, value: [2, 0x68, 0x69]), .init(name: "n", wire: 0, value: [7])])
        ])
        let sample = Sample(
            name: "a", count: -3, ratio: 0.5, tags: ["x", "y"], nested: [[1, 2], []],
            inner: .init(flag: true, small: 7), blob: Data([1, 2, 3]), none: nil)
        return [
            ("reader-program", reader),
            ("key-tuple", key),
            ("sync-payload", [2] + change.encode()),
            ("codable-value", [3] + _BinaryEncoder.encode(sample)),
        ]
    }

    /// A `Codable` value with every shape the binary coder writes.
    struct Sample: Codable, Equatable {
        var name: String
        var count: Int
        var ratio: Double
        var tags: [String]
        var nested: [[Int8]]
        var inner: Inner
        var blob: Data
        var none: UInt?

        struct Inner: Codable, Equatable {
            var flag: Bool
            var small: Float
        }
    }

    // Round trips compare encoded bytes, not values: a NaN decodes and
    // encodes back, but is not equal to itself.

    private static func codable(_ bytes: [UInt8]) -> Bool {
        guard let value = try? _BinaryDecoder.decode(Sample.self, from: bytes[...]) else { return false }
        let encoded = _BinaryEncoder.encode(value)
        let again = try? _BinaryDecoder.decode(Sample.self, from: encoded[...])
        precondition(again.map(_BinaryEncoder.encode) == encoded, "a decoded value does not survive encode and decode")
        return true
    }

    private static func keys(_ bytes: [UInt8]) -> Bool {
        guard let elements = try? KeyEncoding.decode(bytes) else { return false }
        let encoded = KeyEncoding.encode(elements)
        let again = try? KeyEncoding.decode(encoded)
        precondition(again.map(KeyEncoding.encode) == encoded, "a decoded key does not survive encode and decode")
        return true
    }

    private static func syncPayload(_ bytes: [UInt8]) -> Bool {
        guard let changes = try? SyncChangeSet.decode(bytes) else { return false }
        let again = try? SyncChangeSet.decode(changes.encode())
        precondition(again == changes, "a decoded payload does not survive encode and decode")
        return true
    }

    /// Each byte of `bytes` up to a zero is an operation on a reader over
    /// everything after that zero; every result is checked.
    private static func readerProgram(_ bytes: [UInt8]) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let program = bytes[..<split]
        let data = Array(bytes[min(split + 1, bytes.count)...])
        data.withUnsafeBytes { raw in
            var reader = ByteReader(raw, from: 0, limit: Int(program.first ?? 0xFF))
            for operation in program.dropFirst() {
                let before = reader.index
                let argument = Int(operation >> 3)
                do {
                    switch operation & 7 {
                    case 0:
                        let value = try reader.varint()
                        check(raw, from: before, to: reader.index, value: value)
                    case 1: _ = try reader.byte()
                    case 2: _ = try reader.count(bias: argument & 1)
                    case 3:
                        let taken = try reader.take(argument)
                        precondition(taken.count == argument && reader.index == before + argument, "take")
                    case 4: _ = try reader.text(length: argument)
                    case 5: _ = try reader.littleEndian(UInt32.self)
                    case 6: _ = try reader.bigEndian(width: argument % 9)
                    default:
                        let copied = try reader.copy(argument)
                        precondition(copied.count == argument && reader.index == before + argument, "copy")
                    }
                } catch let error as ByteReadError {
                    precondition(reader.index == before, "a failed read moved the reader")
                    precondition(error.offset == before, "a failure names another offset")
                } catch {
                    preconditionFailure("the reader threw \(error), not a ByteReadError")
                }
                precondition(reader.index <= reader.limit && reader.limit <= raw.count, "read past the limit")
            }
        }
    }

    /// A varint the reader decoded: the same value by the slow way, and
    /// the same end from `Varint.end`.
    private static func check(_ raw: UnsafeRawBufferPointer, from start: Int, to end: Int, value: UInt64) {
        var slow: UInt64 = 0
        for (position, byte) in raw[start..<end].enumerated() { slow |= UInt64(byte & 0x7F) << UInt64(7 * position) }
        precondition(slow == value && end - start <= Varint.maximumLength, "varint decoded wrongly")
        let skipped = raw.baseAddress.flatMap { Varint.end($0, from: start, limit: raw.count) }
        precondition(skipped == end, "Varint.end disagrees with the decoder")
    }
}
