import StrataTesting
import XCTest

@testable import StrataEngine

/// The one varint codec and bounded reader: every format's decoder reads
/// through them, so these hold them to a plain reference and to the
/// errors each kind of bad input gets.
final class ByteReaderTests: XCTestCase {
    /// LEB128 decoded the slow way: nil when no byte among `bytes` ends the
    /// varint ("truncated"), `.some(nil)` when its tenth byte holds more
    /// than bit 63 or does not end it ("overflow").
    private func reference(_ bytes: [UInt8]) -> (value: UInt64, length: Int)?? {
        var value: UInt64 = 0
        for (position, byte) in bytes.enumerated() {
            if position == 9 && byte > 1 { return .some(nil) }
            value |= UInt64(byte & 0x7F) << UInt64(7 * position)
            if byte < 0x80 { return (value, position + 1) }
        }
        return nil
    }

    private func read(_ bytes: [UInt8]) -> Result<(UInt64, Int), ByteReadError> {
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            return Result { () throws(ByteReadError) in (try reader.varint(), reader.index) }
        }
    }

    func testEveryLengthRoundTripsInItsShortestForm() throws {
        var values: [UInt64] = [0, 1, UInt64.max, UInt64.max - 1, 1 << 63]
        for bits in 1...63 {
            values += [1 << UInt64(bits) - 1, 1 << UInt64(bits), 1 << UInt64(bits) + 1]
        }
        for value in values {
            var appended: [UInt8] = []
            Varint.append(value, to: &appended)
            XCTAssertEqual(appended.count, Varint.size(of: value), "size of \(value)")
            let bits = 64 - value.leadingZeroBitCount
            XCTAssertEqual(appended.count, max(1, (bits + 6) / 7), "shortest form of \(value)")
            var stored = [UInt8](repeating: 0xEE, count: 12)
            let length = stored.withUnsafeMutableBytes { Varint.store(value, at: $0.baseAddress!) }
            XCTAssertEqual(Array(stored.prefix(length)), appended, "store and append agree for \(value)")
            XCTAssertEqual(stored[length], 0xEE, "store wrote past its size for \(value)")
            switch read(appended + [0x7F, 0x80]) {
            case .success(let (decoded, end)):
                XCTAssertEqual(decoded, value)
                XCTAssertEqual(end, appended.count)
            case .failure(let error):
                XCTFail("\(value): \(error)")
            }
            let skipped = (appended + [0x7F, 0x80]).withUnsafeBytes {
                Varint.end($0.baseAddress!, from: 0, limit: $0.count)
            }
            XCTAssertEqual(skipped, appended.count, "end of \(value)")
        }
    }

    /// Random bytes, lengths 0–12, limits anywhere: the codec agrees with
    /// the reference on the value, the length and the kind of failure, and
    /// `end` finds the same end whenever the varint decodes.
    func testDecodingAgreesWithAReferenceOnRandomBytes() throws {
        var generator = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "ByteReaderRandom"))
        for _ in 0..<200_000 {
            let length = Int.random(in: 0...12, using: &generator)
            // Mostly continuation bytes, so that long and overlong varints
            // are common.
            let bytes = (0..<length).map { _ in
                Bool.random(using: &generator)
                    ? UInt8.random(in: 0x80...0xFF, using: &generator)
                    : UInt8.random(in: 0...3, using: &generator) | (Bool.random(using: &generator) ? 0 : 0x70)
            }
            let expected = reference(bytes)
            switch (read(bytes), expected) {
            case (.success(let (value, end)), .some(.some(let want))):
                XCTAssertEqual(value, want.value, "\(bytes)")
                XCTAssertEqual(end, want.length, "\(bytes)")
                let skipped = bytes.withUnsafeBytes { raw in
                    raw.baseAddress.flatMap { Varint.end($0, from: 0, limit: raw.count) }
                }
                XCTAssertEqual(skipped, want.length, "\(bytes)")
            case (.failure(.truncated(let offset)), .none):
                XCTAssertEqual(offset, 0)
            case (.failure(.varintOverflow(let offset)), .some(.none)):
                XCTAssertEqual(offset, 0)
            case (let got, _):
                XCTFail("\(bytes): got \(got), reference \(String(describing: expected))")
            }
        }
    }

    func testOverlongAndOverflowingVarints() throws {
        // A longer form of a value is read as the value.
        guard case .success((0, 2)) = read([0x80, 0x00]) else { return XCTFail("overlong zero") }
        guard case .success((1 << 63, 10)) = read([UInt8](repeating: 0x80, count: 9) + [0x01]) else {
            return XCTFail("bit 63 in the tenth byte")
        }
        // Bits past 63: the tenth byte above 1, or an eleventh byte.
        guard case .failure(.varintOverflow(0)) = read([UInt8](repeating: 0xFF, count: 9) + [0x02]) else {
            return XCTFail("tenth byte 2")
        }
        guard case .failure(.varintOverflow(0)) = read([UInt8](repeating: 0x80, count: 10) + [0x00]) else {
            return XCTFail("eleven bytes")
        }
        guard case .failure(.truncated(0)) = read([]) else { return XCTFail("empty") }
        guard case .failure(.truncated(0)) = read([0x80, 0x81]) else { return XCTFail("no last byte") }
    }

    /// A reader stops at its limit even where the buffer goes on, and
    /// refuses counts, lengths and text the bytes left cannot hold, each
    /// failure naming where it happened.
    func testReadsStopAtTheLimitWithTheOffsetOfTheFailure() throws {
        let bytes: [UInt8] = [3, 0x61, 0x62, 0x63, 9, 0xFF, 0xFE, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06]
        try bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw, limit: 5)
            XCTAssertEqual(reader.remaining, 5)
            XCTAssertEqual(try reader.text(length: try reader.count()), "abc")
            XCTAssertThrowsError(try reader.count()) { error in
                XCTAssertEqual(error as? ByteReadError, .countPastEnd(count: 9, offset: 4))
            }
            XCTAssertEqual(reader.index, 4, "a failed read moves nothing")
            XCTAssertEqual(try reader.byte(), 9)
            XCTAssertTrue(reader.isAtEnd)
            XCTAssertThrowsError(try reader.byte()) { XCTAssertEqual($0 as? ByteReadError, .truncated(offset: 5)) }

            var counts = ByteReader(raw, from: 4)
            XCTAssertThrowsError(try counts.count()) { error in
                XCTAssertEqual(error as? ByteReadError, .countPastEnd(count: 9, offset: 4))
            }
            var biased = ByteReader(raw, from: 4)
            XCTAssertEqual(try biased.count(bias: 1), 9, "n + 1 forms may name one more than is left")

            var text = ByteReader(raw, from: 5)
            XCTAssertThrowsError(try text.text(length: 2)) { XCTAssertEqual($0 as? ByteReadError, .invalidUTF8(offset: 5)) }
            XCTAssertEqual(text.index, 5, "a failed read moves nothing")
            XCTAssertEqual(try text.take(2).count, 2)
            XCTAssertThrowsError(try text.take(-1)) { XCTAssertEqual($0 as? ByteReadError, .truncated(offset: 7)) }
            XCTAssertThrowsError(try text.copy(7)) { XCTAssertEqual($0 as? ByteReadError, .truncated(offset: 7)) }

            var numbers = ByteReader(raw, from: 7)
            XCTAssertEqual(try numbers.littleEndian(UInt16.self), 0x0201)
            XCTAssertEqual(try numbers.bigEndian(width: 3), 0x03_0405)
            XCTAssertThrowsError(try numbers.littleEndian(UInt32.self)) {
                XCTAssertEqual($0 as? ByteReadError, .truncated(offset: 12))
            }
            XCTAssertEqual(try numbers.bigEndian(width: 1), 6)
        }
        // An empty buffer has no base address: every read is a clean failure.
        try [UInt8]().withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            XCTAssertThrowsError(try reader.varint()) { XCTAssertEqual($0 as? ByteReadError, .truncated(offset: 0)) }
            XCTAssertThrowsError(try reader.byte()) { XCTAssertEqual($0 as? ByteReadError, .truncated(offset: 0)) }
        }
    }
}
