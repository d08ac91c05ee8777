import Foundation
import StrataEngine
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Memory or address space the engine asks for and does not get: the
/// call throws a typed error and the store keeps its last commit. Not
/// under ThreadSanitizer (`.ci/run` leaves this class out): its allocator
/// ends the process instead of returning no memory.
final class AllocationFailureTests: EngineTestCase {
    #if os(Linux)
        /// The process's address space in use (`VmSize`), in bytes.
        private func addressSpace() throws -> Int {
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmSize:") })
            // "VmSize:\t  3892 kB"; with eight digits no space follows the tab.
            let fields = line.split { $0 == " " || $0 == "\t" }
            let kib = try XCTUnwrap(fields.count == 3 ? Int(fields[1]) : nil, "unexpected line \(line)")
            return kib * 1024
        }

        /// Runs `body` with the address space limited to what the process
        /// uses now plus `headroom` bytes, and restores the limit after.
        private func withAddressSpaceLimited<R>(headroom: Int, _ body: () throws -> R) throws -> R {
            var saved = rlimit()
            XCTAssertEqual(getrlimit(Int32(RLIMIT_AS.rawValue), &saved), 0)
            var tight = saved
            tight.rlim_cur = rlim_t(try addressSpace() + headroom)
            XCTAssertEqual(setrlimit(Int32(RLIMIT_AS.rawValue), &tight), 0)
            defer { XCTAssertEqual(setrlimit(Int32(RLIMIT_AS.rawValue), &saved), 0) }
            return try body()
        }

        /// A spilled transaction holds its later changes back in memory it
        /// allocates: a put it cannot hold throws and the transaction goes on.
        func testAPutTheBufferCannotHoldThrowsOutOfMemory() throws {
            let db = try open("no-memory.strata", DatabaseOptions(cacheSizeBytes: 16 * 4096))
            func key(_ i: Int) -> [UInt8] { Array(String(format: "key-%06d", i).utf8) }
            let large = [UInt8](repeating: 9, count: 160 << 20)
            func small(_ i: Int, _ round: Int) -> [UInt8] { [UInt8](repeating: UInt8((i + round) % 251), count: 100) }
            var thrown: (any Error)?
            let tx = try db.beginWrite()
            let tree = try tx.createTree("t")
            for i in 0..<1200 { try tx.put(key(i), small(i, 0), in: tree) }
            XCTAssertGreaterThan(db.statistics.spilledPages, 0)
            // Room for small allocations, not for the 256 MiB buffer the
            // large value needs.
            try withAddressSpaceLimited(headroom: 96 << 20) {
                do { try tx.put(key(5), large, in: tree) } catch { thrown = error }
            }
            guard case .io(_, let path, let errno)? = thrown as? StorageError else {
                tx.rollback()
                return XCTFail("expected an io error, got \(String(describing: thrown))")
            }
            XCTAssertEqual(errno, ENOMEM)
            XCTAssertEqual(path, db.path)
            // The put that failed held nothing back; the transaction goes on.
            try tx.put(key(6), small(6, 1), in: tree)
            try tx.commit()
            try db.read { rx in
                let t = try rx.tree("t")
                XCTAssertEqual(try rx.get(key(5), in: t), small(5, 0))
                XCTAssertEqual(try rx.get(key(6), in: t), small(6, 1))
                XCTAssertEqual(try rx.count(t), 1200)
            }
            XCTAssertTrue(try db.check().isHealthy)
            try db.close()
        }

        /// An exclusive handle keeps the log's index in 256 MiB of address
        /// space it reserves at open: an open that cannot reserve it throws
        /// (it trapped before), holds no lock, and a later open finds the
        /// store as it was.
        func testAnExclusiveOpenWithoutAddressSpaceThrows() throws {
            let options = DatabaseOptions(locking: .exclusive)
            var db = try open("exclusive.strata", options)
            try db.write { tx in try tx.put(bytes("k"), bytes("v"), in: try tx.createTree("t")) }
            try db.close()
            var thrown: (any Error)?
            try withAddressSpaceLimited(headroom: 32 << 20) {
                do { _ = try open("exclusive.strata", options) } catch { thrown = error }
            }
            guard case .io(_, let path, let errno)? = thrown as? StorageError else {
                return XCTFail("expected an io error, got \(String(describing: thrown))")
            }
            XCTAssertEqual(errno, ENOMEM)
            XCTAssertEqual(path, directory.file("exclusive.strata") + "-shm")
            db = try open("exclusive.strata", options)
            XCTAssertEqual(try db.read { try $0.get(bytes("k"), in: try $0.tree("t")) }, bytes("v"))
            try db.close()
        }
    #endif
}
