import FidelitySupport
import Foundation
import Strata
import XCTest

/// `fetch(_:batchSize:)` keeps memory bounded by the batch size.
nonisolated final class BatchFetchTests: FidelityTestCase {
    private final class WeakBox {
        weak var model: Recipe?
        init(_ model: Recipe) { self.model = model }
    }

    func testPassedBatchesAreFreedUnlessTheAppHoldsThem() throws {
        let container = try container(Recipe.self)
        do {
            let writer = ModelContext(container)
            for index in 0..<100 { writer.insert(Recipe(name: String(format: "r%03d", index), servings: index)) }
            try writer.save()
        }
        let context = ModelContext(container)
        let results = try context.fetch(FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)]), batchSize: 10)
        XCTAssertEqual(results.count, 100)
        let held = results[0]
        var boxes: [WeakBox] = []
        for index in 1..<10 { boxes.append(WeakBox(results[index])) }
        results[5].servings = 500  // changed: stays registered
        // Another context updates a row of a later batch after the fetch.
        let other = ModelContext(container)
        let late = try XCTUnwrap(try other.fetch(FetchDescriptor<Recipe>(predicate: #Predicate { $0.name == "r095" })).first)
        late.summary = "updated"
        try other.save()

        var servings = 0
        for recipe in results { servings += recipe.servings }
        XCTAssertEqual(servings, (0..<100).reduce(0, +) - 5 + 500)
        XCTAssertEqual(boxes.filter { $0.model != nil }.count, 1, "only the changed model of a passed batch is kept")
        XCTAssertEqual(boxes[4].model?.servings, 500)
        XCTAssertEqual(results[95].summary, "updated", "a batch is built from the store as it is now")
        XCTAssertTrue(results[0] === held, "a model the app holds keeps its identity")
        XCTAssertTrue(context.registeredModel(for: held.persistentModelID) as Recipe? === held)
        try context.save()
        XCTAssertEqual(try other.fetchCount(FetchDescriptor<Recipe>(predicate: #Predicate { $0.servings == 500 })), 1)
    }

    func testAReleasedModelTheAppHoldsStillMergesOtherSaves() throws {
        let container = try container(Recipe.self)
        let writer = ModelContext(container)
        for index in 0..<20 { writer.insert(Recipe(name: "r\(index)")) }
        try writer.save()
        let context = ModelContext(container)
        var held: Recipe?
        try context.enumerate(FetchDescriptor<Recipe>(sortBy: [SortDescriptor(\.name)]), batchSize: 5) { recipe in
            if held == nil { held = recipe }
        }
        let kept = try XCTUnwrap(held)
        let other = ModelContext(container)
        let name = kept.name
        let same = try XCTUnwrap(try other.fetch(FetchDescriptor<Recipe>(predicate: #Predicate { $0.name == name })).first)
        same.servings = 42
        try other.save()
        let fetched = try context.fetch(FetchDescriptor<Recipe>(predicate: #Predicate { $0.name == name }))
        XCTAssertTrue(fetched.first === kept, "one model per row")
        XCTAssertEqual(kept.servings, 42, "the other context's save reached the released model")
    }
}
