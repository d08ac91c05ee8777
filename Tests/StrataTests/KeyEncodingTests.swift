import Foundation
import Strata
import StrataTesting
import XCTest

/// Property tests of the order-preserving key encoding: every value
/// round-trips, and byte order equals Swift's `<` order.
final class KeyEncodingTests: XCTestCase {
    typealias E = KeyEncoding.Element

    func order(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a == b ? 0 : (a.lexicographicallyPrecedes(b) ? -1 : 1)
    }

    func swiftOrder<T: Comparable>(_ a: T, _ b: T) -> Int { a == b ? 0 : (a < b ? -1 : 1) }

    /// Checks round trip and order over every pair of `values`.
    func checkOrder<T: Comparable>(_ values: [T], _ element: (T) -> E, file: StaticString = #filePath, line: UInt = #line) throws
    {
        let encoded = values.map { KeyEncoding.encode([element($0)]) }
        for (i, v) in values.enumerated() {
            XCTAssertEqual(try KeyEncoding.decode(encoded[i]), [element(v)], "round trip of \(v)", file: file, line: line)
        }
        for i in values.indices {
            for j in values.indices {
                let expected = swiftOrder(values[i], values[j])
                let got = order(encoded[i], encoded[j])
                if expected != got {
                    XCTFail("\(values[i]) vs \(values[j]): Swift \(expected), bytes \(got)", file: file, line: line)
                    return
                }
            }
        }
    }

    func testIntegers() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "key encoding integers"))
        var ints: [Int64] = [.min, .min + 1, -256, -1, 0, 1, 255, 256, .max - 1, .max]
        for _ in 0..<150 { ints.append(Int64(bitPattern: random.next()) >> Int64(random.choose(63))) }
        try checkOrder(ints) { .int($0) }
        var uints: [UInt64] = [0, 1, 255, 256, .max]
        for _ in 0..<150 { uints.append(random.next() >> UInt64(random.choose(63))) }
        try checkOrder(uints) { .uint($0) }
        // Every byte count, at its edges.
        var edges: [Int64] = []
        for bytes in 1..<8 {
            let power = Int64(1) << Int64(8 * bytes)
            edges += [power - 1, power, power + 1, -power - 1, -power, -power + 1]
        }
        try checkOrder(edges) { .int($0) }
        var unsignedEdges: [UInt64] = []
        for bytes in 1..<8 {
            let power = UInt64(1) << UInt64(8 * bytes)
            unsignedEdges += [power - 1, power]
        }
        try checkOrder(unsignedEdges) { .uint($0) }
        // Every width goes through Int64 / UInt64.
        try checkOrder([Int8.min, -1, 0, 1, Int8.max]) { .int(Int64($0)) }
        try checkOrder([UInt16(0), 1, .max]) { .uint(UInt64($0)) }
    }

    func testIntegersTakeTheCodeAndTheirSignificantBytes() throws {
        let sizes: [(E, Int)] = [
            (.int(0), 1), (.int(1), 2), (.int(-1), 2), (.int(255), 2), (.int(-255), 2), (.int(256), 3), (.int(-256), 3),
            (.int(-257), 3), (.int(.max), 9), (.int(.min), 9), (.uint(0), 1), (.uint(255), 2), (.uint(.max), 9),
        ]
        for (element, size) in sizes { XCTAssertEqual(KeyEncoding.encode([element]).count, size, "\(element)") }
        // Stores written before hold integers as a code and 8 bytes: they
        // still decode.
        XCTAssertEqual(try KeyEncoding.decode([0x20, 0x80, 0, 0, 0, 0, 0, 0, 5]), [.int(5)])
        XCTAssertEqual(try KeyEncoding.decode([0x20, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), [.int(-1)])
        XCTAssertEqual(try KeyEncoding.decode([0x21, 0, 0, 0, 0, 0, 0, 1, 0]), [.uint(256)])
        // A longer form than the shortest is not a key this encoding makes.
        for bad: [UInt8] in [[0x89, 0x00], [0x87, 0xFF], [0x99, 0x00], [0x90, 0x80, 0, 0, 0, 0, 0, 0, 0], [0x8A, 0x01]] {
            XCTAssertThrowsError(try KeyEncoding.decode(bad), "\(bad)") { error in
                XCTAssertTrue(error is KeyEncoding.DecodingError, "\(error)")
            }
        }
    }

    func testDoublesIncludingSignedZeroInfinitiesAndNaN() throws {
        var random = SeededRandom(seed: 11)
        var doubles: [Double] = [
            -.infinity, -.greatestFiniteMagnitude, -1, -.leastNonzeroMagnitude, 0, .leastNonzeroMagnitude, 1, .pi,
            .greatestFiniteMagnitude, .infinity,
        ]
        for _ in 0..<150 { doubles.append(Double(bitPattern: random.next())) }
        doubles.removeAll { $0.isNaN }
        // -0.0 and 0.0 are equal to Swift but distinct keys: check order
        // against Swift without it, then pin the documented placements.
        try checkOrder(doubles) { .double($0) }
        let negativeZero = KeyEncoding.encode([.double(-0.0)])
        let zero = KeyEncoding.encode([.double(0.0)])
        XCTAssertEqual(order(negativeZero, zero), -1, "-0.0 sorts just before 0.0")
        XCTAssertEqual(order(KeyEncoding.encode([.double(-.leastNonzeroMagnitude)]), negativeZero), -1)
        XCTAssertEqual(
            order(KeyEncoding.encode([.double(.infinity)]), KeyEncoding.encode([.double(.nan)])), -1, "NaN after +infinity")
        XCTAssertEqual(try KeyEncoding.decode(negativeZero), [.double(-0.0)])
        XCTAssertEqual(try KeyEncoding.decode(KeyEncoding.encode([.double(.nan)])), [.double(.nan)])
        try checkOrder([Float(-2.5), -0.5, 0, 1e-30, 3.4e38, .infinity]) { .float($0) }
        let dates = [Date(timeIntervalSince1970: -1e9), Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1.7e9)]
        try checkOrder(dates) { .date($0) }
    }

    func testStringsEmptyNonASCIIAndEmbeddedZero() throws {
        var strings = [
            "", "\u{0}", "\u{0}\u{0}", "a", "a\u{0}", "a\u{0}b", "ab", "b", "Z", "z", "é", "e\u{301}x", "ü", "日本", "日本語", "😀",
            "\u{FFFF}",
            "résumé",
        ]
        var random = SeededRandom(seed: 12)
        let alphabet: [Character] = ["a", "b", "\u{0}", "é", "z", "😀", "ß", " "]
        for _ in 0..<120 {
            strings.append(String((0..<random.choose(6)).map { _ in alphabet[random.choose(alphabet.count)] }))
        }
        try checkOrder(strings) { .string($0) }
        // Canonically equivalent strings are one key.
        XCTAssertEqual(KeyEncoding.encode([.string("é")]), KeyEncoding.encode([.string("e\u{301}")]))
    }

    func testBytesBoolsUUIDsAndNilFirst() throws {
        try checkOrder([[UInt8](), [0], [0, 0], [0, 1], [1], [1, 0], [255], [255, 255]].map { Bytes($0) }) { .bytes($0.value) }
        XCTAssertEqual(order(KeyEncoding.encode([.bool(false)]), KeyEncoding.encode([.bool(true)])), -1, "false before true")
        let uuids = (0..<50).map { _ in UUID() }
        let encoded = uuids.map { KeyEncoding.encode([.uuid($0)]) }
        for (u, e) in zip(uuids, encoded) { XCTAssertEqual(try KeyEncoding.decode(e), [.uuid(u)]) }
        // nil sorts before every value of every type.
        let null = KeyEncoding.encode([.null])
        for e in [E.bool(false), .int(.min), .uint(0), .double(-.infinity), .string(""), .bytes([]), .uuid(UUID())] {
            XCTAssertEqual(order(null, KeyEncoding.encode([e])), -1, "nil before \(e)")
        }
    }

    func testTuplesCompareElementByElement() throws {
        let tuples: [[E]] = [
            [.null, .int(5)], [.string(""), .int(0)], [.string(""), .int(1)], [.string("a"), .int(-1)], [.string("a"), .int(0)],
            [.string("a\u{0}"), .int(-5)], [.string("ab"), .null], [.string("ab"), .int(-3)],
        ]
        for i in tuples.indices {
            XCTAssertEqual(try KeyEncoding.decode(KeyEncoding.encode(tuples[i])), tuples[i])
            for j in tuples.indices {
                XCTAssertEqual(
                    order(KeyEncoding.encode(tuples[i]), KeyEncoding.encode(tuples[j])), swiftOrder(i, j), "\(i) vs \(j)")
            }
        }
    }

    func testGarbageNeverTraps() {
        var random = SeededRandom(seed: 13)
        var errors = 0
        for _ in 0..<5000 {
            let bytes = random.bytes(random.choose(40))
            do { _ = try KeyEncoding.decode(bytes) } catch is KeyEncoding.DecodingError { errors += 1 } catch {
                XCTFail("unexpected error \(error)")
            }
        }
        XCTAssertGreaterThan(errors, 1000)
        XCTAssertThrowsError(try KeyEncoding.decode([0x40, 0xC3])) { error in
            XCTAssertEqual((error as? KeyEncoding.DecodingError)?.reason, "unterminated string or bytes")
        }
    }
}

/// Byte strings compared like keys (lexicographically).
struct Bytes: Comparable, CustomStringConvertible {
    var value: [UInt8]
    init(_ value: [UInt8]) { self.value = value }
    static func < (a: Bytes, b: Bytes) -> Bool { a.value.lexicographicallyPrecedes(b.value) }
    var description: String { "\(value)" }
}
