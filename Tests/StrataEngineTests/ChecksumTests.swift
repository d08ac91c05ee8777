import CStrataCRC32C
import StrataEngine
import StrataTesting
import XCTest

/// The CRC-32C behind every page and log checksum: known values, the
/// hardware path against the table path, and the refusal of stores written
/// with the previous (zlib CRC-32) format.
final class ChecksumTests: EngineTestCase {
    private func crc(_ bytes: [UInt8], seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { strata_crc32c(seed, $0.baseAddress, $0.count) }
    }

    /// The check value of the Castagnoli CRC and the vectors of RFC 3720
    /// (iSCSI), appendix B.4.
    func testKnownValues() {
        XCTAssertEqual(crc(Array("123456789".utf8)), 0xE306_9283)
        XCTAssertEqual(crc([]), 0)
        XCTAssertEqual(crc([UInt8](repeating: 0, count: 32)), 0x8A91_36AA)
        XCTAssertEqual(crc([UInt8](repeating: 0xFF, count: 32)), 0x62A8_AB43)
        XCTAssertEqual(crc((0..<32).map { UInt8($0) }), 0x46DD_794E)
        XCTAssertEqual(crc((0..<32).map { UInt8(31 - $0) }), 0x113F_DB5C)
        #if arch(x86_64)
            // Every x86-64 processor since 2008 has SSE4.2.
            XCTAssertEqual(strata_crc32c_is_hardware(), 1)
        #endif
    }

    /// Every length around the three-stream block boundaries (3 x 1360
    /// bytes), every start alignment, random seeds, and a message split at
    /// many points and continued: the fast path and the table agree.
    func testHardwarePathAgreesWithTheTable() {
        var random = SeededRandom(seed: 32)
        let data = random.bytes(20_000)
        data.withUnsafeBytes { raw in
            let base = raw.baseAddress!
            var lengths = Array(0..<80) + Array(4070..<4200) + [8159, 8160, 8161, 12_240, 16_380, 16_384, 19_990]
            lengths += (0..<200).map { _ in Int.random(in: 0..<19_990, using: &random) }
            for length in lengths {
                for offset in 0..<9 {
                    let seed = UInt32(truncatingIfNeeded: random.next())
                    let fast = strata_crc32c(seed, base + offset, length)
                    let table = strata_crc32c_portable(seed, base + offset, length)
                    XCTAssertEqual(fast, table, "length \(length), offset \(offset)")
                }
            }
            let whole = strata_crc32c_portable(0, base, 16_384)
            for split in stride(from: 0, through: 16_384, by: 97) {
                let first = strata_crc32c(0, base, split)
                XCTAssertEqual(strata_crc32c(first, base + split, 16_384 - split), whole, "split at \(split)")
            }
        }
    }

    /// A store of format version 1 (zlib CRC-32 checksums) gets a typed
    /// error naming the version, not a checksum mismatch or a trap.
    func testAStoreOfTheOldFormatIsRefusedByVersion() throws {
        let path = directory.file("old.strata")
        let db = try Database.open(path: path, options: DatabaseOptions(durability: .none))
        try db.write { tx in try tx.put(bytes("k"), bytes("v"), in: try tx.createTree("t")) }
        try db.close()
        expectDamaged(path, because: "made a store of the old format to be refused")
        var data = try XCTUnwrap(readFile(path))
        XCTAssertEqual(Array(data[16..<20]), [0, 0, 0, 2])
        data[19] = 1
        PageBytes.resealChecksum(&data, page: 0, pageSize: 4096)
        try writeFile(path, data)
        XCTAssertThrowsError(try Database.open(path: path)) { error in
            guard case StorageError.corruptFile(let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("unsupported format version 1"), reason)
        }
    }
}
