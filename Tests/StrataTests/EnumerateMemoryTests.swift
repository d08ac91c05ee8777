import Foundation
import StrataTesting
import XCTest

@testable import Strata

@Model
final class Reading {
    var sensor: Int
    var text: String

    init(sensor: Int, text: String) {
        self.sensor = sensor
        self.text = text
    }
}

#if os(Linux)
    /// `enumerate` keeps memory bounded by its batch size, mapped file pages
    /// included: they count in the process's RSS.
    final class EnumerateMemoryTests: StoreTestCase {
        /// Before each batch gave the store's mapped pages back, enumerating
        /// this 20 MiB store left all of it resident (the README's million
        /// objects: a peak RSS of 161 MiB instead of 29).
        func testEnumerationDoesNotKeepTheMappedStoreResident() throws {
            let text = String(repeating: "r", count: 300)
            do {
                let container = try container(for: [Reading.self])
                let context = ModelContext(container)
                for i in 0..<60_000 { context.insert(Reading(sensor: i, text: text)) }
                try context.save()
            }
            // A new handle maps the store afresh: nothing of it is resident.
            let container = try container(for: [Reading.self])
            let before = try XCTUnwrap(ProcessMemory.residentFileBytes())
            var seen = 0
            var peak = 0
            try ModelContext(container).enumerate(FetchDescriptor<Reading>(), batchSize: 2000) { reading in
                seen += 1
                if seen % 2000 == 1999 { peak = max(peak, try XCTUnwrap(ProcessMemory.residentFileBytes()) - before) }
            }
            XCTAssertEqual(seen, 60_000)
            XCTAssertLessThan(peak, 8 << 20, "enumerating kept \(peak >> 20) MiB of the store resident")
        }
    }
#endif
