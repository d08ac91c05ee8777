import StrataTesting
import XCTest

@testable import StrataEngine

/// The interpolated leaf search used for 8-byte keys (row ids): it must
/// land where a plain binary search does for every spread of keys and any
/// bounds, since the bounds only place its first probe.
final class InterpolatedSearchTests: EngineTestCase {
    private func key(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    /// The index of the first of `sorted` that is `>= value`, or nil.
    private func firstIndex(in sorted: [UInt64], atLeast value: UInt64) -> Int? {
        var lo = 0
        var hi = sorted.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if sorted[mid] < value { lo = mid + 1 } else { hi = mid }
        }
        return lo < sorted.count ? lo : nil
    }

    /// Sorted distinct keys spread in one of several ways.
    private func spread(_ kind: Int, count: Int, random: inout SeededRandom) -> [UInt64] {
        var values: Set<UInt64> = []
        let base = random.next() % (1 << 40)
        while values.count < count {
            switch kind {
            case 0: values.insert(base + UInt64(values.count))  // dense, as row ids are
            case 1: values.insert(base + random.next() % UInt64(count * 3))  // holes, as after deletes
            case 2: values.insert(random.next())  // anywhere
            case 3:  // two clumps at the ends
                values.insert(random.next() % 2 == 0 ? random.next() % 1024 : UInt64.max - random.next() % 1024)
            default: values.insert(base + UInt64(values.count) * UInt64(values.count))  // ever wider gaps
            }
        }
        return values.sorted()
    }

    func testLandsWhereBinarySearchDoesForAnySpreadAndBounds() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "InterpolatedSearchTests"))
        let pageSize = 4096
        let page = UnsafeMutableRawPointer.allocate(byteCount: pageSize, alignment: 8)
        defer { page.deallocate() }
        let node = Node(mapped: page, pageSize: pageSize)
        for round in 0..<400 {
            let kind = round % 5
            let values = spread(kind, count: Int.random(in: 1...300, using: &random), random: &random)
            node.format(leaf: true)
            for (i, value) in values.enumerated() {
                let cell = [8, 0] + key(value)  // key length, value length, key
                XCTAssertTrue(cell.withUnsafeBytes { node.insertCell(at: i, $0.baseAddress!, $0.count) })
            }
            for _ in 0..<60 {
                // A key present, next to one, or outside all of them.
                let pick = values[Int.random(in: 0..<values.count, using: &random)]
                let probe: UInt64 =
                    switch random.next() % 4 {
                    case 0: pick
                    case 1: pick &+ 1
                    case 2: pick &- 1
                    default: random.next()
                    }
                let expected = firstIndex(in: values, atLeast: probe) ?? values.count
                let from = Int.random(in: 0...expected, using: &random)
                // True bounds, the first and last keys, or bounds that bound nothing.
                let low: (position: Int, prefix: UInt64)
                let high: (position: Int, prefix: UInt64)
                switch random.next() % 3 {
                case 0:
                    low = (0, values[0] &- random.next() % 4)
                    high = (values.count, values.last! == .max ? .max : values.last! + 1)
                case 1:
                    low = (from, from < values.count ? values[from] : values.last!)
                    high = (values.count - 1, values.last!)
                default:
                    let position = Int.random(in: 0...from, using: &random)
                    low = (position, random.next())
                    high = (Int.random(in: (position + 1)...(values.count + 1), using: &random), random.next())
                }
                let (index, found) = key(probe).withUnsafeBytes {
                    node.interpolatedLowerBound($0.baseAddress!, from: from, low: low, high: high)
                }
                XCTAssertEqual(index, expected, "spread \(kind), probe \(probe), from \(from), bounds \(low) \(high)")
                XCTAssertEqual(found, expected < values.count && values[expected] == probe)
            }
        }
    }

    /// A branch's child index, placed by interpolation, against a binary
    /// search of the same separators: random byte strings of 1 to 20 bytes
    /// (cut short, as separators are), 8-byte numbers in each spread, and
    /// separators sharing a prefix longer than 8 bytes; probes equal to a
    /// separator, one byte longer or shorter, or random.
    func testChildIndexMatchesBinarySearchOnAnyBranch() throws {
        var random = SeededRandom(
            seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "InterpolatedSearchTests.branch"))
        let pageSize = 4096
        let page = UnsafeMutableRawPointer.allocate(byteCount: pageSize, alignment: 8)
        defer { page.deallocate() }
        let node = Node(mapped: page, pageSize: pageSize)
        var interpolated = 0
        for round in 0..<600 {
            let count = Int.random(in: 1...140, using: &random)
            var separators: Set<[UInt8]> = []
            while separators.count < count {
                switch round % 4 {
                case 0:
                    let length = Int.random(in: 1...20, using: &random)
                    separators.insert((0..<length).map { _ in UInt8.random(in: 0...255, using: &random) })
                case 1: separators.insert(Array(key(UInt64(round) << 20 + random.next() % UInt64(count * 4))))
                case 2: separators.insert(key(random.next() % 5 == 0 ? random.next() : random.next() % 1_000))  // skewed
                default: separators.insert(Array("shared-prefix-".utf8) + [UInt8.random(in: 0...255, using: &random)])
                }
            }
            let sorted = separators.sorted { $0.lexicographicallyPrecedes($1) }
            node.format(leaf: false)
            for (i, separator) in sorted.enumerated() {
                let cell = [0, 0, 0, 2, UInt8(separator.count)] + separator  // child page, key length, key
                XCTAssertTrue(cell.withUnsafeBytes { node.insertCell(at: i, $0.baseAddress!, $0.count) })
            }
            XCTAssertEqual(node.count, sorted.count)
            for _ in 0..<60 {
                let pick = sorted[Int.random(in: 0..<sorted.count, using: &random)]
                let probe: [UInt8] =
                    switch random.next() % 4 {
                    case 0: pick
                    case 1: pick + [UInt8.random(in: 0...255, using: &random)]
                    case 2: Array(pick.dropLast())
                    default: (0..<Int.random(in: 0...12, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    }
                let expected = sorted.firstIndex { probe.lexicographicallyPrecedes($0) } ?? sorted.count
                let (index, binary) = probe.withUnsafeBytes {
                    let p = $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                    return (node.childIndex(p, probe.count), node.childIndex(p, probe.count, in: 0, node.count))
                }
                XCTAssertEqual(binary, expected, "round \(round), probe \(probe)")
                XCTAssertEqual(index, expected, "round \(round), probe \(probe), separators \(sorted.count)")
                if sorted.count >= 16 { interpolated += 1 }
            }
        }
        XCTAssertGreaterThan(interpolated, 20_000)
    }

    /// Seeks, gets and ascending runs of `seekForward` over a tree of 8-byte keys
    /// (many leaves, three levels, holes left by deletes) against a sorted
    /// array: the descent's separators feed the interpolation.
    func testSeeksOverRowIdKeysMatchASortedArray() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "InterpolatedSearchTests.tree"))
        let db = try open("rows.strata", DatabaseOptions(durability: .none))
        var values: [UInt64] = []
        try db.write { tx in
            let tree = try tx.createTree("rows")
            for row in UInt64(1)...150_000 {
                try tx.put(key(row), bytes("r\(row)"), in: tree)
            }
            // Holes of every size: single rows, runs, whole leaves.
            var row: UInt64 = 1
            while row <= 150_000 {
                let gap = [1, 1, 5, 40, 700][Int.random(in: 0..<5, using: &random)]
                if random.next() % 3 == 0 {
                    for deleted in row..<min(row + UInt64(gap), 150_001) { try tx.delete(key(deleted), in: tree) }
                } else {
                    values.append(contentsOf: row..<min(row + UInt64(gap), 150_001))
                }
                row += UInt64(gap)
            }
        }
        try db.read { tx in
            let tree = try tx.tree("rows")
            let forward = try tx.cursor(tree)
            let seeker = try tx.cursor(tree)
            for _ in 0..<60 {
                var position = UInt64.random(in: 0...150_010, using: &random)
                for _ in 0..<150 {
                    position += [0, 1, 2, 9, 300, 1_000, 20_000][Int.random(in: 0..<7, using: &random)]
                    let probe = key(position)
                    let expected = firstIndex(in: values, atLeast: position)
                    let exact = try probe.withUnsafeBytes { try forward.seekForward($0) }
                    XCTAssertEqual(forward.isValid, expected != nil, "\(position)")
                    let present = expected.map { values[$0] == position } ?? false
                    XCTAssertEqual(try tx.get(probe, in: tree), present ? bytes("r\(position)") : nil, "\(position)")
                    XCTAssertEqual(try seeker.seek(probe), expected != nil, "\(position)")
                    guard let expected else { break }
                    XCTAssertEqual(try forward.key(), key(values[expected]), "\(position)")
                    XCTAssertEqual(try seeker.key(), key(values[expected]), "\(position)")
                    XCTAssertEqual(exact, values[expected] == position, "\(position)")
                    XCTAssertEqual(try forward.value(), bytes("r\(values[expected])"))
                }
                try forward.first()
            }
        }
    }
}
