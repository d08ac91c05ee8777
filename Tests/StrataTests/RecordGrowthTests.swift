import Foundation
import StrataEngine
import XCTest

@testable import Strata

/// Records inserted in row order fill their leaves to fifteen sixteenths
/// (`WriteTransaction.leaveRoomToGrow(in:)`): a change that makes each one a
/// few bytes longer (a title edited, an optional set) then rewrites the
/// leaves in place instead of splitting most of them.
final class RecordGrowthTests: StoreTestCase {
    private func makeContainer(_ name: String) throws -> ModelContainer {
        var configuration = ModelConfiguration(url: storeURL(name))
        // The history of the changes would add pages of its own.
        configuration.recordsHistory = false
        return try track(ModelContainer(for: Schema([Memo.self]), configurations: [configuration]))
    }

    private func pageCount(_ container: ModelContainer) -> Int { container.store.database.statistics.pageCount }

    /// 5,000 memos saved at once, then in saves of 100, every title made
    /// two bytes longer in one save, fetched by another context: the store
    /// keeps its pages (it split about one leaf in three before).
    func testLongerRecordsKeepTheirLeaves() throws {
        for batch in [5_000, 100] {
            let container = try makeContainer("saves-of-\(batch).store")
            let context = ModelContext(container)
            for i in 0..<5_000 {
                context.insert(Memo(title: "Memo \(i)", body: "", priority: i % 7))
                if (i + 1) % batch == 0 { try context.save() }
            }
            let loaded = pageCount(container)
            let editor = ModelContext(container)
            let memos = try editor.fetch(FetchDescriptor<Memo>(sortBy: [SortDescriptor(\.priority)]))
            XCTAssertEqual(memos.count, 5_000)
            for memo in memos { memo.title += "!!" }
            try editor.save()
            XCTAssertEqual(pageCount(container), loaded, "saves of \(batch): leaves split")
            let reread = try ModelContext(container).fetch(FetchDescriptor<Memo>())
            XCTAssertEqual(reread.count, 5_000)
            XCTAssertTrue(reread.allSatisfy { $0.title.hasPrefix("Memo ") && $0.title.hasSuffix("!!") })
        }
    }
}
