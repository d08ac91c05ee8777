import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// Foundation calls SwiftData code makes around its models, which Linux
/// Foundation lacks and Strata declares, and predicates composed from other
/// predicates and expressions.
nonisolated final class FoundationGapTests: FidelityTestCase {
    func testTheStandardDirectoriesNameTheUsersFolders() {
        XCTAssertEqual(URL.documentsDirectory.lastPathComponent, "Documents")
        XCTAssertEqual(
            URL.applicationSupportDirectory,
            FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first)
        XCTAssertEqual(URL.cachesDirectory, FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first)
        XCTAssertTrue(URL.libraryDirectory.path.hasPrefix(URL.homeDirectory.path))
        // The usual store location in SwiftData apps.
        let url = URL.applicationSupportDirectory.appendingPathComponent("Trips.store")
        XCTAssertEqual(ModelConfiguration(url: url).name, "Trips")
    }

    func testLocalizedStringsFallBackToTheirValue() {
        let name = "Ada"
        let count = 3
        XCTAssertEqual(String(localized: "Untitled"), "Untitled")
        XCTAssertEqual(String(localized: "\(name) has \(count) trips"), "Ada has 3 trips")
        XCTAssertEqual(String(localized: "100% \(name)", comment: "a comment"), "100% Ada")
        let value: String.LocalizationValue = "\(name) has \(count) trips"
        XCTAssertEqual(value.key, "%@ has %lld trips")
    }

    func testLocalizedStringResourcesDescribeTheirStringAndLocalizeToIt() throws {
        let plain: LocalizedStringResource = "Untitled"
        XCTAssertEqual(plain.key, "Untitled")
        XCTAssertEqual(String(localized: plain), "Untitled")
        let stops = 4
        let counted: LocalizedStringResource = "\(stops) stops"
        XCTAssertEqual(counted.key, "%lld stops")
        XCTAssertEqual(String(localized: counted), "4 stops")
        let keyed = LocalizedStringResource("trip.title", defaultValue: "Trip", table: "Trips", comment: "a heading")
        XCTAssertEqual(keyed.key, "trip.title")
        XCTAssertEqual(keyed.table, "Trips")
        XCTAssertEqual(String(localized: keyed), "Trip", "no table has the key: the default value")
        XCTAssertEqual(String(localized: "trip.title", defaultValue: "Trip \(stops)"), "Trip 4")
        // As model code uses them: an enum's titles, and a model's
        // computed property.
        XCTAssertEqual(TripStatus.allCases.map { String(localized: $0.title) }, ["Planned", "Under way"])
        let decoded = try JSONDecoder().decode(
            LocalizedStringResource.self, from: JSONEncoder().encode(counted))
        XCTAssertEqual(decoded, counted)
        XCTAssertEqual(String(localized: decoded), "4 stops")
    }

    func testAutoreleasepoolRunsItsBodyAndRethrows() throws {
        let imported = autoreleasepool { (1...3).reduce(0, +) }
        XCTAssertEqual(imported, 6)
        XCTAssertThrowsError(try autoreleasepool { throw CocoaLikeError() })
    }

    func testCaseInsensitiveAndLocalizedCompareInPredicates() throws {
        let context = ModelContext(try container(Recipe.self))
        for name in ["soup", "Stew", "bread", "Éclair"] { context.insert(Recipe(name: name)) }
        try context.save()
        // `#Predicate` takes no `.orderedSame` (a member without a base, on
        // Apple platforms too): apps capture the value.
        let same = ComparisonResult.orderedSame
        let ascending = ComparisonResult.orderedAscending
        let descending = ComparisonResult.orderedDescending
        let named = try context.fetch(
            FetchDescriptor<Recipe>(predicate: #Predicate { $0.name.caseInsensitiveCompare("SOUP") == same }))
        XCTAssertEqual(named.map(\.name), ["soup"])
        let before = try context.fetch(
            FetchDescriptor<Recipe>(
                predicate: #Predicate { $0.name.localizedCompare("c") == ascending },
                sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(before.map(\.name), ["bread"])
        let caseless = try context.fetchCount(
            FetchDescriptor<Recipe>(predicate: #Predicate { $0.name.caseInsensitiveCompare("s") == descending }))
        XCTAssertEqual(caseless, 2, "soup and Stew sort after s, whatever their case")
    }

    func testPredicatesThatEvaluateOtherPredicatesAndExpressions() throws {
        let context = ModelContext(try container(Recipe.self))
        for (name, servings) in [("Soup", 4), ("Salad", 1), ("Stew", 6), ("Bread", 8)] {
            context.insert(Recipe(name: name, servings: servings))
        }
        try context.save()
        let large = #Predicate<Recipe> { $0.servings > 2 }
        let startsWithS = #Predicate<Recipe> { $0.name.starts(with: "S") }
        let both = #Predicate<Recipe> { large.evaluate($0) && startsWithS.evaluate($0) }
        let found = try context.fetch(FetchDescriptor(predicate: both, sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(found.map(\.name), ["Soup", "Stew"])
        let plan = try context.explain(FetchDescriptor(predicate: both))
        XCTAssertFalse(plan.contains("Predicate.evaluate"), "a called predicate is translated in place:\n\(plan)")

        let either = #Predicate<Recipe> { !large.evaluate($0) || $0.name == "Bread" }
        XCTAssertEqual(
            try context.fetch(FetchDescriptor(predicate: either, sortBy: [SortDescriptor(\.name)])).map(\.name),
            ["Bread", "Salad"])

        let serves = #Expression<Recipe, Int> { $0.servings * 2 }
        let doubled = #Predicate<Recipe> { serves.evaluate($0) >= 12 }
        XCTAssertEqual(
            try context.fetch(FetchDescriptor(predicate: doubled, sortBy: [SortDescriptor(\.name)])).map(\.name),
            ["Bread", "Stew"])

        // A predicate kept on the model type and called from another, as apps
        // compose filters.
        let matching = Recipe.matching("S")
        let favorite = #Predicate<Recipe> { matching.evaluate($0) && $0.servings < 5 }
        XCTAssertEqual(
            try context.fetch(FetchDescriptor(predicate: favorite, sortBy: [SortDescriptor(\.name)])).map(\.name),
            ["Salad", "Soup"])
    }
}

/// A status whose titles are strings to localize, as apps declare them
/// beside their models.
nonisolated enum TripStatus: String, Codable, CaseIterable {
    case planned
    case underWay

    var title: LocalizedStringResource {
        switch self {
        case .planned: "Planned"
        case .underWay: LocalizedStringResource("status.underWay", defaultValue: "Under way")
        }
    }
}
