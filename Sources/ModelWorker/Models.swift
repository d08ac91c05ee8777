import Foundation
import Strata

// The shop of the multi-process model test: customers, unique by email,
// with their orders (deleted with them). StrataTests compiles this same
// file (Tests/StrataTests/Models/ShopModels.swift links to it) to open
// the store the workers wrote.

@Model final class Customer {
    #Unique<Customer>([\.email])
    var email: String
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Order.customer) var orders: [Order] = []

    init(email: String, name: String) {
        self.email = email
        self.name = name
    }
}

@Model final class Order {
    var number: Int
    var writer: Int
    var customer: Customer?

    init(number: Int, writer: Int) {
        self.number = number
        self.writer = writer
    }
}
