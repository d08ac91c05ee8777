import SwiftSyntaxMacrosTestSupport
import XCTest

@testable import StrataMacros

/// `@Query` makes its property a getter over a `Query` peer whose model
/// type comes from the declared array type.
final class QueryMacroTests: XCTestCase {
    func testTheDeclaredTypeNamesTheModel() {
        assertMacroExpansion(
            """
            struct TripList {
                @Query var trips: [Trip]
                @Query(sort: \\Trip.name, order: .reverse) var byName: Array<Trip>
            }
            """,
            expandedSource: """
                struct TripList {
                    var trips: [Trip] {
                        get {
                            _trips.wrappedValue
                        }
                    }

                    private var _trips: Strata.Query<Trip, [Trip]> = Strata.Query<Trip, [Trip]>()
                    var byName: Array<Trip> {
                        get {
                            _byName.wrappedValue
                        }
                    }

                    private var _byName: Strata.Query<Trip, [Trip]> = Strata.Query<Trip, [Trip]>(sort: \\Trip.name, order: .reverse)
                }
                """,
            macros: ["Query": QueryMacro.self]
        )
    }

    func testAPropertyThatIsNotAnArrayIsReported() {
        assertMacroExpansion(
            """
            struct Bad {
                @Query var count: Int
            }
            """,
            expandedSource: """
                struct Bad {
                    var count: Int
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message:
                        "@Query goes on one 'var' with an array type and no initial value, like '@Query var trips: [Trip]'",
                    line: 2, column: 5),
                DiagnosticSpec(
                    message:
                        "@Query goes on one 'var' with an array type and no initial value, like '@Query var trips: [Trip]'",
                    line: 2, column: 5),
            ],
            macros: ["Query": QueryMacro.self]
        )
    }
}
